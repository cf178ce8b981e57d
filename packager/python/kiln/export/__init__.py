"""Exporters that turn other compilers' kernels into kiln packages."""
