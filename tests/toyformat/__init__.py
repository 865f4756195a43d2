"""A trace format from outside the console, in one package, as CONTRIBUTING's "Add a trace
format" describes it: a toy log (``*.toy.json``, ``{"toy": <id>, "job": ..., "value": ...,
"sum": ...}``) with its companion note ``<stem>.note.txt``, its own part of a run's report
page (``templates/report.html``) and its own words for what it groups and refuses. Registered
only through the entry-point group ``replay_console.formats``
(``tests/console/test_format_recipe.py``)."""
