"""The scenarios an audit runs: batteries, the catalogue, the searches, coverage, scenario files
and engines' conventions."""
