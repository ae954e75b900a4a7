"""Hidden graders of lab03 (extending autograd). Never released."""
