"""The plugin's settings: what each means, where each value came from, and TencentDB's own
Gateway variables."""
