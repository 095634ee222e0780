"""The compiled record core: ``storage_engine.native._core``, built from ``native/`` (Rust, PyO3)
when a Rust toolchain is present. ``optional=True``: without cargo, or when the build fails, pip
prints a warning and installs the pure-Python engine, which then says so (``logctl core``).
``debug=False``: an editable install would otherwise build the core without optimisations.
Everything else about the package is in pyproject.toml."""

from setuptools import setup
from setuptools_rust import Binding, RustExtension

setup(
    rust_extensions=[
        RustExtension(
            "storage_engine.native._core",
            path="native/Cargo.toml",
            binding=Binding.PyO3,
            optional=True,
            debug=False,
        )
    ]
)
