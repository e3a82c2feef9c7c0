"""The one error type for bad input (config, spec, data, records).

The CLI prints these as one line naming the bad value and what is allowed, without a
traceback; anything else is a bug and keeps its traceback.
"""


class InputError(ValueError):
    """Bad input; the message names the bad value and what is allowed."""
