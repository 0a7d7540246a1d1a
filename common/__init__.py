"""Small helpers every layer uses: how numbers and text read to a person, text the store
can hold, one resource per thread."""
