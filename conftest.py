"""Root conftest: registers the shared fixture modules under tests/support.

Append a module here when you add real-component fixtures (tmux, Chromium, …) so that the
plugin test suites under plugins/*/tests can use them too.
"""

pytest_plugins = ["tests.support.rabbitmq", "tests.support.env", "tests.support.chromium", "tests.support.hosts",
                "tests.support.netns"]
