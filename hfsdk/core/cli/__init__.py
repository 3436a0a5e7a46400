"""The ``hfsdk`` command line (click)."""
