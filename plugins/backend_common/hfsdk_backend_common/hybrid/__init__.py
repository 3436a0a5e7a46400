"""The hybrid-engine half of the shared home: model formats, decoder, reshard, groups."""
