"""The lab's foundation, imported by every other package and importing none of them: config
dataclass machinery (schema, and coerce for what one value may be), name registries, errors,
logging, file-system helpers and checks, the progress display and the plugin loader."""
