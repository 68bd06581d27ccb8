"""A submission's life: upload, quotas and rate limits, the queue and its fair order (``turns``),
start, success, failure, retry, cancel, re-run, final selections; and the reads the pages and the
API need (``selectors``)."""
