"""Agent loops behind the loop port: the reference loop and the user's (Python, HTTP, stdio)."""
