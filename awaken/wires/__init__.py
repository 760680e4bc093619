"""wires"""
