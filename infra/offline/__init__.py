"""The offline engine: run the Pulumi program under mocks, capture every registration, render and check."""
