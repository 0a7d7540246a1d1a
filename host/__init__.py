"""What is Hermes-specific: the host's base class or a stand-in, building the runtime and
binding engines, the slash command, Hermes' config.yaml reader and its threshold rules."""
