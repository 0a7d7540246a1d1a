"""One compaction: its steps, Gateway compactions prepared ahead, its typed record, and
what a request carries on a host that selects context."""
