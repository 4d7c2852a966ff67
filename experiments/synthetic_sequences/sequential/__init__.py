"""The sequential design, its one home: its config, looks, record, decisions, look files and text (stage.Looks is what the plan calls)."""
