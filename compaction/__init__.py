"""One compaction: its steps, Gateway compactions prepared ahead, its typed record, and
what a 0.22 request carries."""
