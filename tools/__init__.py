"""PyTorch side of Yomiage: reference model, exporter, bundle builder. Never imported at run time."""
