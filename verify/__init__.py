"""tickformer.verify"""
