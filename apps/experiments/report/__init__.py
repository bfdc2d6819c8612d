"""The results docs, generated from the experiment store (``edgerl results docs``)."""
