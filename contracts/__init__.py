"""tickformer.contracts"""
