//! Adversarial scenarios of the fleet's fault paths (simulator), each a test that fails while
//! the defect it shows is there.
