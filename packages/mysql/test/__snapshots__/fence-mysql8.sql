DROP FUNCTION IF EXISTS `shard_5`.`reserve_ids`;

CREATE FUNCTION `shard_5`.`reserve_ids`(n INT) RETURNS BIGINT UNSIGNED
  NOT DETERMINISTIC NO SQL
  COMMENT 'shardflake: logical shard 5 moved to another server'
BEGIN
  SIGNAL SQLSTATE 'SF005' SET MESSAGE_TEXT = 'shardflake: logical shard 5 moved to server db-b:3306 ''x''; update the shard map';
  RETURN NULL;
END;

INSERT INTO `shard_5`.`sf_meta` (`name`, `value`) VALUES
  ('moved_to', 'server db-b:3306 ''x'''),
  ('moved_at', DATE_FORMAT(UTC_TIMESTAMP(), '%Y-%m-%dT%H:%i:%sZ')),
  ('move_id', UUID())
ON DUPLICATE KEY UPDATE `value` = IF(`name` = 'moved_to', VALUES(`value`), `value`);

DROP FUNCTION IF EXISTS `shard_5`.`next_id`;

CREATE FUNCTION `shard_5`.`next_id`() RETURNS BIGINT
  NOT DETERMINISTIC NO SQL
  COMMENT 'shardflake: logical shard 5 moved to another server'
BEGIN
  SIGNAL SQLSTATE 'SF005' SET MESSAGE_TEXT = 'shardflake: logical shard 5 moved to server db-b:3306 ''x''; update the shard map';
  RETURN NULL;
END;

DROP PROCEDURE IF EXISTS `shard_5`.`next_ids`;

CREATE PROCEDURE `shard_5`.`next_ids`(IN n INT)
  NOT DETERMINISTIC NO SQL
  COMMENT 'shardflake: logical shard 5 moved to another server'
BEGIN
  SIGNAL SQLSTATE 'SF005' SET MESSAGE_TEXT = 'shardflake: logical shard 5 moved to server db-b:3306 ''x''; update the shard map';
END;

DROP PROCEDURE IF EXISTS `shard_5`.`generate_id`;

CREATE PROCEDURE `shard_5`.`generate_id`(IN shard_key TEXT CHARACTER SET utf8mb4, OUT id BIGINT)
  NOT DETERMINISTIC NO SQL
  COMMENT 'shardflake: logical shard 5 moved to another server'
BEGIN
  SIGNAL SQLSTATE 'SF005' SET MESSAGE_TEXT = 'shardflake: logical shard 5 moved to server db-b:3306 ''x''; update the shard map';
END;

UPDATE `shard_5`.`sf_counter` SET `v` = `v` + 1125899906842625 WHERE `k` = 1 AND `v` <= 1125899906842624;

INSERT INTO `shard_5`.`sf_meta` (`name`, `value`)
SELECT 'moved_fence', CAST(`v` - 1125899906842625 AS CHAR) FROM `shard_5`.`sf_counter` WHERE `k` = 1 AND `v` > 1125899906842624
ON DUPLICATE KEY UPDATE `value` = CAST(GREATEST(CAST(`value` AS UNSIGNED), CAST(VALUES(`value`) AS UNSIGNED)) AS CHAR);
