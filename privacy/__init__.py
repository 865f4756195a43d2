"""Personal data held in stored traces: subjects, their keys, the subject index, erasure."""
