"""A toy kind of governed request, installed only by its tests (see ``kind.py``)."""
