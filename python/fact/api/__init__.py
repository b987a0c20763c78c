"""FACT from Python (issue: a model object in a notebook or a script, not a file): fact.optimize, fact.explain,
fact.save / fact.load, and torch.compile(model, backend="fact"). The package's top level re-exports them."""
