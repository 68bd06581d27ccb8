"""Challenges: phases (tasks) in order, registration with terms, and moving to the next phase."""
