"""Telling people a submission is done: e-mail to its submitter and webhooks to the task's
operators."""
