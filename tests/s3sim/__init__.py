"""The test S3 server: moto's server mode behind a fault layer (server.py), as tests/hubsim is the Hub's."""
