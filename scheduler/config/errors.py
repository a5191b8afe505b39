"""The one error a bad configuration or policy file produces."""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration problem, reported as one line: file, field path, what was expected.

    >>> str(ConfigError("sched.yaml", "profiles[0].plugins.score.enabled[1].name",
    ...                 'unknown plugin "Dynamc"; known plugins: ...'))
    'sched.yaml: profiles[0].plugins.score.enabled[1].name: unknown plugin "Dynamc"; known plugins: ...'
    """

    def __init__(self, file: str | None, path: str, message: str) -> None:
        self.file = file
        self.path = path
        self.message = message
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ": ".join(p for p in (self.file, self.path) if p)
        return f"{where}: {self.message}" if where else self.message
