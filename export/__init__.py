"""tickformer.export"""
