"""The package's version, one place for `layout --version` and `layout_core.__version__`."""

__version__ = "0.1.0"
