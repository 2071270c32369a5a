"""Every place bridge leans on something a library does not promise, one module per reach-in.

A few speed paths use a private part of another library: the C module behind a standard-library
package, an attribute or a method a library keeps for itself. Each stays because it saves a
measured share of a command or a frame. Each module says what it relies on, what it gains and
what to do when the library changes; ``tests/private_apis/`` pins each one, so an upgrade that
breaks it fails a test. This ``__init__`` imports nothing: the click-free paths import single
modules of it.
"""
