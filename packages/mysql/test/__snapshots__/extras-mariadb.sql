DELIMITER $$
SET @shardflake_saved_sql_mode = @@SESSION.sql_mode$$

SET SESSION sql_mode = 'STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'$$

CREATE OR REPLACE TRIGGER `app`.`posts_sf_id`
BEFORE INSERT ON `app`.`posts` FOR EACH ROW
BEGIN
  IF NEW.`id` IS NULL OR NEW.`id` = 0 THEN
    SET NEW.`id` = `shard_5`.`next_id`();
  END IF;
END$$

SET SESSION sql_mode = COALESCE(@shardflake_saved_sql_mode, @@GLOBAL.sql_mode)$$
DELIMITER ;

DELIMITER $$
SET @shardflake_saved_sql_mode = @@SESSION.sql_mode$$

SET SESSION sql_mode = 'STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'$$

CREATE DATABASE IF NOT EXISTS `tickets`$$

CREATE TABLE IF NOT EXISTS `tickets`.`tickets64_photos` (
  `stub` CHAR(1) NOT NULL PRIMARY KEY,
  `id` BIGINT UNSIGNED NOT NULL COMMENT 'next ticket of this server',
  `server_increment` INT UNSIGNED NOT NULL COMMENT 'increment it was installed with (0: paused)',
  `server_offset` INT UNSIGNED NOT NULL COMMENT 'offset it was installed with, 1..increment'
) ENGINE=InnoDB$$

CREATE OR REPLACE FUNCTION `tickets`.`next_photos`(n INT, step INT, start INT) RETURNS BIGINT UNSIGNED
  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake ticket server: n tickets in one single-row UPDATE, returns the first'
BEGIN
  DECLARE recorded_increment BIGINT;
  DECLARE recorded_offset BIGINT;
  DECLARE message VARCHAR(128);
  IF n IS NULL OR n < 1 OR n > 1000000 THEN
    SIGNAL SQLSTATE 'SF020' SET MESSAGE_TEXT = 'shardflake: n must be from 1 to 1000000';
  END IF;
  UPDATE `tickets`.`tickets64_photos` SET `id` = LAST_INSERT_ID(`id` + `server_increment` * n)
   WHERE `stub` = 'a' AND `server_increment` = step AND `server_offset` = start;
  IF ROW_COUNT() = 1 THEN
    RETURN LAST_INSERT_ID() - step * n;
  END IF;
  SET recorded_increment = (SELECT `server_increment` FROM `tickets`.`tickets64_photos` WHERE `stub` = 'a');
  SET recorded_offset = (SELECT `server_offset` FROM `tickets`.`tickets64_photos` WHERE `stub` = 'a');
  IF recorded_increment IS NULL THEN
    SIGNAL SQLSTATE 'SF032' SET MESSAGE_TEXT = 'shardflake: no ticket row';
  END IF;
  IF recorded_increment = 0 THEN
    SIGNAL SQLSTATE 'SF031' SET MESSAGE_TEXT = 'shardflake: a reconfiguration is not finished';
  END IF;
  SET message = CONCAT('shardflake: this server hands out tickets with increment ', recorded_increment, ', offset ', recorded_offset);
  SIGNAL SQLSTATE 'SF030' SET MESSAGE_TEXT = message;
END$$

SET SESSION sql_mode = COALESCE(@shardflake_saved_sql_mode, @@GLOBAL.sql_mode)$$
DELIMITER ;
