"""A trace format from outside the console, in one package, as CONTRIBUTING's "Add a trace
format" describes it: a toy log (``*.toy.json``, ``{"toy": <id>, "job": ..., "value": ...,
"sum": ...}``) with its companion note ``<stem>.note.txt``. Registered only through the
entry-point group ``replay_console.formats`` (``tests/replay/test_format_recipe.py``)."""
