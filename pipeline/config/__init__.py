"""Configuration: convnorm's flags, presets, Beam's flag table, the checks that need no Beam, and the checked Job."""
