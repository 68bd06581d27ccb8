"""Leaderboards: the read models kept per board (``leaderboard``), the ranking rule as pure
code (``ranking``), the one board row that the page, the CSV and the API read (``row``), how
figures and charts are shown (``display``, ``charts``), and the board's cache versions."""
