"""One status model and its one renderer: the slash command, ``status`` and doctor share them."""
