"""What runs inside the user's process: `apply()`, its state, the import guard, the rank guard
and its hook, the start-up hook (`autoapply`, `_startup/`).

Imports fetch, check and below; never resolve. Heavy third-party imports stay inside functions.
"""
