"""tickformer.runtime"""
