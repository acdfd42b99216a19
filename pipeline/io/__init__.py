"""Reading and writing files: plain code over Beam's FileSystems, no Beam graph."""
