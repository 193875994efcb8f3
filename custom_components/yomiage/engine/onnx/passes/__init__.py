"""Load-time graph passes: each module one rewrite of one model's graphs, each listed once in
registry.py with its version, the graphs it applies to and what it depends on."""
