"""The launch runtime: plans, prepared launches, resident workspaces, scratch buffers and launch
recording."""
