"""Plumbing the apps' web layers share, below them: OpenAPI helpers, strict request parameters,
rate limits and throttles, pagination. Imports Django and DRF; nothing of the apps."""
