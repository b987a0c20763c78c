"""Chart of a `fact bench` suite (the suite runner itself is C++: src/bench/)."""
