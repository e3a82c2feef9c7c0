"""initmem: reproduce 'Do Deep Networks Forget Initialization?' end to end."""

__version__ = "0.1.0"
