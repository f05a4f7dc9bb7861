"""The evidence archive for the vendor, and the scrubber every member of it passes."""
