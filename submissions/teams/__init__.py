"""Teams: creating one, inviting, joining, leaving, removing members (``services``)."""
