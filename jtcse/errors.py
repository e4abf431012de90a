"""Exceptions for user mistakes. Both subclass standard types, so library callers catch ``ValueError`` /
``FileNotFoundError``; the CLI prints any of them as one ``Error:`` line instead of a traceback."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any


class JTCSEError(ValueError):
    """A problem with the user's input or setup, stated so the user can fix it."""


class ModelNotFoundError(JTCSEError, FileNotFoundError):
    """A model path that does not exist (also a ``FileNotFoundError``)."""


class SettingError(JTCSEError):
    """A setting's value, or two settings together, that cannot work, raised wherever it shows (a settings check,
    a trainer, a loss). The message names each setting it is about by a field of ``template``
    (``"{cael_every}={k} does not divide ..."``), so whoever knows the settings under other names says it in those
    (:meth:`renamed`: ``--twin-cael-every`` in ``jtcse pipeline``). ``names``: each field's name until then (a
    list: the keys themselves); ``values``: the template's other fields. ``table``: the settings table the keys
    belong to (a pipeline stage's ``twin``), once known (:meth:`within`); ``where``: where the values came from
    (``recipe FILE [twin]``), said first."""

    def __init__(
        self,
        template: str,
        names: Mapping[str, str] | Sequence[str],
        *,
        table: str | None = None,
        where: str = "",
        **values: Any,
    ):
        self.template, self.values, self.table, self.where = template, values, table, where
        self.names = dict(names) if isinstance(names, Mapping) else {key: key for key in names}
        text = template.format(**values, **self.names)
        super().__init__(f"{where}: {text}" if where else text)

    def __reduce__(self):  # pickled whole (a launcher's worker), not as the message alone
        rebuild = functools.partial(
            type(self), self.template, self.names, table=self.table, where=self.where, **self.values
        )
        return rebuild, ()

    @classmethod
    def naming(cls, text: str, key: str) -> SettingError:
        """The error ``text`` (a ``ValueError``'s, raised where this class cannot be: a checkpoint's own code) as a
        setting error about ``key``, which the text names as it is (``"cael_every=3 does not divide ..."``)."""
        escaped = [part.replace("{", "{{").replace("}", "}}") for part in text.split(key)]
        return cls(("{" + key + "}").join(escaped), [key])

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.names)

    def renamed(self, name: Callable[[str], str | None]) -> SettingError:
        """This error with each setting called ``name(key)``, where that is not ``None``."""
        names = {key: name(key) or shown for key, shown in self.names.items()}
        return SettingError(self.template, names, table=self.table, where=self.where, **self.values)

    def within(self, table: str | None, where: str = "") -> SettingError:
        """This error, its keys those of ``table`` (unless it knew already) and ``where`` said first (if given)."""
        return SettingError(
            self.template, self.names, table=self.table or table, where=where or self.where, **self.values
        )
