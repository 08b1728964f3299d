"""Classes pickled by gen_pickles.py. Importable so that tests can load the fixtures."""
import enum
import os


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Shell:
    """Pickles as a call to os.system. Pickling only records the reference; loading the
    result with pickle would run the command, which is why the fixture exists: the safe
    reader must flag it and never call anything."""

    def __reduce__(self):
        return (os.system, ("echo hi",))
