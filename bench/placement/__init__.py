"""The placement benchmark (``make bench-placement``): where pods go, judged on simulated real usage."""
